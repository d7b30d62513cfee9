"""Settings: each one declared once (:mod:`rune.settings.keys`), and the files, environment
and flags read into a :class:`rune.settings.config.Settings` (:mod:`rune.settings.config`)."""
