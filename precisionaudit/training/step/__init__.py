"""The training step read forward: a path-aware walk over each function that follows the
AMP protocol and emits typed events (``events.py``); the rules in ``training/checks``
decide on them. ``walk.step_hits(script, rule)`` is what a step rule's check yields."""
