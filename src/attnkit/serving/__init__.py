"""Serving trained models outside attnkit's own decoders (CTranslate2 export and inference)."""
