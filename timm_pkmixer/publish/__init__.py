"""Publishing trained models: reading a checkpoint safely and rebuilding the model it was trained as
(`checkpoint_file`), the Hub folder a push or an expansion writes and its upload (`hub`), the model card
(`model_card`). Nothing in the model core imports this package."""
