"""Starting, attaching to and stopping a system: its spec, its owner's key and lock, a convention's
members, process lookup and titles, and what a worker shares with its pool."""
