"""The scenario schema: what a YAML file may say (config, degrade policies, pools)."""
