"""Results outside the kernel: ``nbflow view`` (a local read-only web viewer over stores) and ``nbflow report`` /
``nf.report`` (one self-contained HTML file). ``data.py`` makes the pages' JSON; the components that render
it are ``nbflow/_front`` (the same the notebook explorer uses)."""
