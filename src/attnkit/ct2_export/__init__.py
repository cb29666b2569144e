"""Export to CTranslate2, and translation with the export: the conversion of a Transformer
run's weights (`attnkit.ct2_export.ctranslate2`) and the manifest that proves an exported
folder unchanged (`attnkit.ct2_export.manifest`)."""
