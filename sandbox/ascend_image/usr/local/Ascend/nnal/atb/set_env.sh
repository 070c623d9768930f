# NNAL/ATB set_env.sh STAND-IN (dapo-ops sandbox, Ascend-like profile)
export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1
