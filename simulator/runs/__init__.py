"""Running scenarios end to end: one scenario, or pools behind a gateway."""
