"""The A/B numerical check: fp32 reference vs the target policy vs the policy with a plan.

A fixed number of model executions (reference, baseline, planned; one backward each with
``--grad``); everything else (first divergence, FLOP shares, gradient statistics) is
measured by hooks during those runs. Entry point: ``runner.run_check``.
"""
