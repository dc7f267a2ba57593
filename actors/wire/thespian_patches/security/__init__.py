"""Security patches: they keep strangers out and files private.  One that cannot apply refuses the start."""
