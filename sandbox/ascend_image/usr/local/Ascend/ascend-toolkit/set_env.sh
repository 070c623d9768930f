# CANN set_env.sh STAND-IN (dapo-ops sandbox, Ascend-like profile): the variables CANN's own file exports
# (the ascend-toolkit's set_env.sh; cf. the env of a sourced CANN shell in vllm-project/vllm-ascend#397).
export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest
export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}
export ASCEND_OPP_PATH=${ASCEND_TOOLKIT_HOME}/opp
export ASCEND_AICPU_PATH=${ASCEND_TOOLKIT_HOME}
export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:${LD_LIBRARY_PATH}
export PATH=${ASCEND_TOOLKIT_HOME}/bin:${PATH}
