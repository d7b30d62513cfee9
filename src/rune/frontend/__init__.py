"""What every front end (the command line, the TUI, the editor server) shares: the view of a
run's events and approvals (:mod:`rune.frontend.view`) and the approval driver
(:mod:`rune.frontend.approvals`)."""
