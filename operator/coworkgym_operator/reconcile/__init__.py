"""Pure reconcile decisions: observe → decide → (new status, actions). No I/O here."""
