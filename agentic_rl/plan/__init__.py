"""Planners that emit text subgoals for the hierarchical text agent (SPEC A8)."""

from agentic_rl.plan.planners import ChatPlanner, ExpertPlanPlanner, Planner, build_planner

__all__ = ["Planner", "ExpertPlanPlanner", "ChatPlanner", "build_planner"]
