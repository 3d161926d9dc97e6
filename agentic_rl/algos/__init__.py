"""Learners by config name.

``LOOP_ALGORITHMS`` entries follow ``algos.base.Algorithm`` and train in the shared loop
(``train.loop``); each builds itself with ``from_config(config, env)``. On-policy and text
learners still have their own drivers (``train.onpolicy_run``, ``train.text_run``).
"""

from __future__ import annotations

from agentic_rl.algos.hgpo import HGPO
from agentic_rl.algos.hgpo_sac import HGPOSAC
from agentic_rl.algos.opd import OPD
from agentic_rl.algos.ppo import PPO
from agentic_rl.algos.sac import SAC
from agentic_rl.algos.text_opd import TextOPD

LOOP_ALGORITHMS = {"sac": SAC, "opd": OPD, "hgpo_sac": HGPOSAC}
ON_POLICY = {"ppo": PPO, "hgpo": HGPO}
TEXT = {"text_opd": TextOPD}  # admissible-command text envs (ALFWorld)
