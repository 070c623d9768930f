"""verl STAND-IN for ``python3 -m verl.experimental.one_step_off_policy.main_ppo`` (sandbox only).

Real ``@hydra.main`` over the real 0.9.1 yaml (``config/one_step_off_ppo_trainer.yaml``; Megatron:
``--config-name=one_step_off_ppo_megatron_trainer``). The yaml's ``hydra.searchpath`` is
``file://verl/trainer/config``, relative to the CWD, so it must be launched from ``/verl`` exactly like verl.
"""

import hydra

from verl._standin import trainer


@hydra.main(config_path="config", config_name="one_step_off_ppo_trainer", version_base=None)
def main(config):
    trainer.run(config, entry="one_step_off")


if __name__ == "__main__":
    main()
