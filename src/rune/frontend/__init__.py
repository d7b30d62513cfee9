"""What every front end (the command line, the TUI, the editor server) shares: the view of a
run's events and approvals (:mod:`rune.frontend.view`), the approval driver
(:mod:`rune.frontend.approvals`), and the line on what a run that did not finish leaves changed
(:mod:`rune.frontend.kept`)."""
