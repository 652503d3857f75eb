"""deepep-a4 components: one ComponentResource per module plus the stack's config model."""
