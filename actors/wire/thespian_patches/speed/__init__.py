"""Speed patches: without one, Pegasus runs correctly, only slower.  One that cannot apply is left
out, with a warning."""
