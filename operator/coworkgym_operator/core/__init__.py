"""What every kind shares: the reconciles' turn-taking, the wake-up queue, carry_out,
conditions, status writes, CRD rendering, the client, settings and the metrics registry."""
