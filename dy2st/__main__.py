"""`python -m dy2st ...` runs the `dy2st` command (see `dy2st.cli`)."""

from dy2st.cli import main

raise SystemExit(main())
