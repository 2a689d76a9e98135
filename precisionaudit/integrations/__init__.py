"""Training frameworks' hooks around ``precisionaudit.watch``: ``transformers`` (the Hugging
Face Trainer's callback) and ``lightning`` (a Lightning callback). Each imports its framework
only when used; nothing in precisionaudit imports them."""
