"""The live kernel: the namespace briefing, interrupts, the agent_libs import hook."""
