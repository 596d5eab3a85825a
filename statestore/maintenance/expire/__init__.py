"""Expiry: key-value and versioned entries past a retention (entries), window and session segments (segments)."""
