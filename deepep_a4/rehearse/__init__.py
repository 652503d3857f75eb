"""`deepep-a4 rehearse`: the stack on cheap CPU machines with probes, before any A4 is paid for (docs/rehearsal.md)."""
