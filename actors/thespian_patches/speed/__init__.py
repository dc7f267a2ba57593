"""Speed and robustness patches: without one, Pegasus runs correctly, only slower (or slower to notice
a dead member).  One that cannot apply is left out, with a warning."""
