"""The application shell: the ``scd`` command line and the embedded demo, the one package that
imports both the publisher and the subscriber."""
