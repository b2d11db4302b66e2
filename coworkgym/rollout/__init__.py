"""Rollouts: a policy, under a harness, in a released environment, with the stateful user.

``trajectory`` is the versioned record every other part reads; ``harness`` is the interface
a policy driver implements. The engine, the user simulator, verification and the filters
live beside them.
"""
