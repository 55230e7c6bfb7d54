"""The domain: cards, labels, policies, the run's settings and the contracts every layer shares.

The lowest layer: it imports nothing else of worldsim's."""
