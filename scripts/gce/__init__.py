"""GCE VM side: the benchmark stage every VM runs after the installer, and the gs:// results source."""
