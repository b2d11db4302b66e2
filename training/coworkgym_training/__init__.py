"""Cowork-Gym's trainers: tokenization with agent-token masks, model-conditioned trajectory
selection (NLL, RSR), and (later) SFT, GRPO and on-policy distillation.

Installed by the ``training`` extra (torch, transformers, ray[train]). The core library
(``coworkgym``) never imports this package; the ``cowork-gym`` CLI finds its commands
through the ``cowork_gym.commands`` entry point group.
"""
