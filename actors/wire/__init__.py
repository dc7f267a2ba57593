"""What crosses the sockets between processes: the authenticated frames and the patches that teach
Thespian's transport to use them (and make it faster and sturdier)."""
