"""Building benchmark tasks: questions from dated articles and markets (the forward pipeline),
hindsight graphs from what happened after (the backward pipeline), under quality gates, and an
annotation sheet for people to check the graphs. See docs/construction.md."""
