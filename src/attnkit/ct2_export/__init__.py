"""Export to CTranslate2, and translation with the export (`attnkit.ct2_export.ctranslate2`):
the conversion of a Transformer run's weights and the manifest that proves a folder unchanged."""
