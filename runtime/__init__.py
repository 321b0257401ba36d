"""What every scd package shares at run time: the root error (:class:`runtime.errors.ScdError`),
the settings base (:class:`runtime.config.ScdSettings`), logging and the redaction of secrets,
the small HTTP server, supervised threads, the clock and progress output; imported from its
modules. It imports no other scd package."""
