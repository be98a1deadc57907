"""The rule book and delivery policy: validation, retry schedule, claim order, outbound guard."""
