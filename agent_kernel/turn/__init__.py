"""One agent turn: the Agent, the loop, approvals, budget, prompt, sub-sessions, warm-up."""
