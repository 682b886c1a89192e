"""What agent turns show in the notebook: the transcript view and its widgets."""
