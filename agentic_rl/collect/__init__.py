"""Collectors step (vector) environments with an algorithm's ``act``."""
