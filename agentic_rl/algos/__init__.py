"""Learners by config name. Each entry builds an object following ``algos.base.Algorithm``."""

from __future__ import annotations

from agentic_rl.algos.hgpo import HGPO
from agentic_rl.algos.hgpo_sac import HGPOSAC
from agentic_rl.algos.opd import OPD
from agentic_rl.algos.ppo import PPO
from agentic_rl.algos.sac import SAC
from agentic_rl.algos.text_opd import TextOPD

OFF_POLICY = {"sac": SAC, "opd": OPD}
ON_POLICY = {"ppo": PPO, "hgpo": HGPO}
HIERARCHICAL_OFF_POLICY = {"hgpo_sac": HGPOSAC}  # two SAC levels, own loop (train.hier_run)
TEXT = {"text_opd": TextOPD}  # admissible-command text envs (ALFWorld), own loop
