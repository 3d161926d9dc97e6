"""Learners by config name; adding one is a file in this package plus its lines here.

``LOOP_ALGORITHMS`` entries follow ``algos.base.Algorithm`` and train in the shared loop
(``train.loop``); each builds itself with ``from_config(config, env)``, and one whose envs are
not ``gymnasium.make``'s (text agents) builds them with ``build_envs(config)``.
``CONFIGS`` maps each name to the pydantic model of its ``algorithm`` section.
"""

from __future__ import annotations

from agentic_rl.algos.hgpo import HGPO, HGPOConfig
from agentic_rl.algos.hgpo_sac import HGPOSAC, HGPOSACConfig
from agentic_rl.algos.opd import OPD, OPDConfig
from agentic_rl.algos.ppo import PPO, PPOConfig
from agentic_rl.algos.ppo_lag import PPOLag, PPOLagConfig
from agentic_rl.algos.sac import SAC, SACConfig
from agentic_rl.algos.sac_lag import SACLag, SACLagConfig
from agentic_rl.algos.td3 import TD3, TD3Config
from agentic_rl.algos.text_opd import TextOPD, TextOPDConfig

LOOP_ALGORITHMS = {"sac": SAC, "opd": OPD, "td3": TD3, "hgpo_sac": HGPOSAC, "ppo": PPO,
                   "hgpo": HGPO, "text_opd": TextOPD, "sac_lag": SACLag, "ppo_lag": PPOLag}
TEXT = {"text_opd": TextOPD}  # admissible-command text envs (ALFWorld)
CONFIGS = {"sac": SACConfig, "opd": OPDConfig, "td3": TD3Config, "ppo": PPOConfig,
           "hgpo": HGPOConfig, "hgpo_sac": HGPOSACConfig, "text_opd": TextOPDConfig,
           "sac_lag": SACLagConfig, "ppo_lag": PPOLagConfig}
