"""toolhost-greet: the example plugin of docs/plugin-api.md."""
