"""Open-loop traffic: seeded arrivals, who sends to whom, QP popularity, the issuer's
posting timeline and the latency distributions of the load rows."""
