"""An example vispe plugin package (used by vispe's tests; a template for your own)."""
