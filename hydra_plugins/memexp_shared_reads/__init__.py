"""memexp's Hydra sweeper, in the namespace Hydra loads plugins from (hydra_plugins); what it does is
memexp.cli.sweeper."""
