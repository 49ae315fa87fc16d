# DtlabLayers.cmake: the layer rules of docs/architecture.md, checked on the link graph at configure time.
#   the base floor (mesh, config, statistics, processes, checkpoint format, launcher) reaches nothing above it;
#   torch-free targets (config, catalogue, cost plans and models, results loading, report, studies) never reach
#   LibTorch or the runtime; the runtime (dtlab_lab, dtlab_strategies) never reaches the cost models, the report or
#   the tools. A target that breaks a rule stops the configure with the chain that breaks it.
# tests/layers/ holds a project that breaks a rule on purpose (the control) and the include-level checks.

# Every target `target` reaches through LINK_LIBRARIES / INTERFACE_LINK_LIBRARIES, with the path to it:
# sets <out>_TARGETS (names) and <out>_PATH_<name> ("a -> b -> name").
function(_dtlab_link_closure target out)
  set(seen ${target})
  set(queue ${target})
  set(path_${target} ${target})
  while(queue)
    list(POP_FRONT queue current)
    get_target_property(aliased ${current} ALIASED_TARGET)
    set(links)
    if(aliased)
      list(APPEND links ${aliased})
    endif()
    get_target_property(type ${current} TYPE)
    foreach(property INTERFACE_LINK_LIBRARIES LINK_LIBRARIES)
      if(property STREQUAL "LINK_LIBRARIES" AND type STREQUAL "INTERFACE_LIBRARY")
        continue()
      endif()
      get_target_property(items ${current} ${property})
      if(items)
        list(APPEND links ${items})
      endif()
    endforeach()
    foreach(item IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
      if(item MATCHES "^\\$<" OR NOT TARGET ${item} OR item IN_LIST seen)
        continue()
      endif()
      list(APPEND seen ${item})
      list(APPEND queue ${item})
      set(path_${item} "${path_${current}} -> ${item}")
    endforeach()
  endwhile()
  set(${out}_TARGETS ${seen} PARENT_SCOPE)
  foreach(t IN LISTS seen)
    set(${out}_PATH_${t} "${path_${t}}" PARENT_SCOPE)
  endforeach()
endfunction()

# dtlab_forbid_links(TARGETS t... FORBIDDEN f... RULE "why"): fails the configure when a target of TARGETS (those
# that exist in this configuration) reaches one of FORBIDDEN through its links.
function(dtlab_forbid_links)
  cmake_parse_arguments(ARG "" "RULE" "TARGETS;FORBIDDEN" ${ARGN})
  set(errors)
  foreach(target IN LISTS ARG_TARGETS)
    if(NOT TARGET ${target})
      continue()
    endif()
    _dtlab_link_closure(${target} closure)
    foreach(forbidden IN LISTS ARG_FORBIDDEN)
      if(forbidden IN_LIST closure_TARGETS)
        list(APPEND errors "  ${target} links ${forbidden}: ${closure_PATH_${forbidden}}")
      endif()
    endforeach()
  endforeach()
  if(errors)
    string(REPLACE ";" "\n" errors "${errors}")
    message(FATAL_ERROR "layer rule broken (${ARG_RULE}):\n${errors}\n(docs/architecture.md, \"Layers\")")
  endif()
endfunction()

# The project's rules.
set(DTLAB_TORCH_FREE_TARGETS dtlab_stats dtlab_mesh dtlab_process dtlab_core dtlab_launch dtlab_catalog dtlab_cost_plans dtlab_cost_models
    dtlab_analysis dtlab-report
    dtlab_scenario_runner analysis_tests config_tests layers_tests process_tests study_tests)
set(DTLAB_RUNTIME_TARGETS dtlab_lab dtlab_gloo dtlab_strategies)
# The base floor: the mesh, config, model shapes, statistics, processes, the checkpoint format and the launcher. It
# knows no strategy (the catalogue hands config validation its ids from above) and no cost model.
set(DTLAB_BASE_FLOOR_TARGETS dtlab_stats dtlab_mesh dtlab_process dtlab_core dtlab_launch)
function(dtlab_check_layers)
  dtlab_forbid_links(RULE "the base floor reaches nothing above it (no catalogue, strategy, cost model or report)"
    TARGETS ${DTLAB_BASE_FLOOR_TARGETS}
    FORBIDDEN dtlab_catalog dtlab_cost_plans dtlab_cost_models dtlab_analysis dtlab_lab dtlab_strategies)
  dtlab_forbid_links(RULE "torch-free code builds without LibTorch and never includes the runtime"
    TARGETS ${DTLAB_TORCH_FREE_TARGETS}
    FORBIDDEN dtlab_torch_cpu dtlab_torch_cuda dtlab_lab dtlab_gloo dtlab_strategies dtlab_kernels dtlab_tools)
  dtlab_forbid_links(RULE "the runtime never reaches the cost models, the report or the tools (the prediction is \
injected by the command layer: TrainOptions::predict)"
    TARGETS ${DTLAB_RUNTIME_TARGETS}
    FORBIDDEN dtlab_cost_models dtlab_analysis dtlab_tools)
endfunction()
