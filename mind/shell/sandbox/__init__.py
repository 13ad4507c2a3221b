"""The sandbox every shell tool command runs in (``docs/design/boundary.md``
"Sandbox"): :mod:`backend` picks bubblewrap or Landlock, :mod:`plan` says
what may be written, :mod:`bwrap` and :mod:`launch` (+ :mod:`landlock`) build
the confined command, :mod:`command` ties them into one argv."""
