"""Configuration: route YAML, overrides, index profiles, settings, components made from them."""
