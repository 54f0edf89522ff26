"""toolhost-greet: the README's example plugin."""
