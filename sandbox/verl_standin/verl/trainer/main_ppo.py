"""verl STAND-IN for ``python3 -m verl.trainer.main_ppo`` (dapo-ops sandbox / test equipment only).

The decorator is the real one verl 0.9.1 uses (``verl/trainer/main_ppo.py``): Hydra composes the real
``config/ppo_trainer.yaml`` with the command-line overrides, so a bad override fails with Hydra's own
message and exit code 1. Megatron: the config-group override ``model_engine=megatron``.
"""

import hydra

from verl._standin import trainer


@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
def main(config):
    trainer.run(config, entry="main_ppo")


if __name__ == "__main__":
    main()
