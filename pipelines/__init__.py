"""nsreplay's pipelines: pure transforms plus one orchestration module per stage."""
